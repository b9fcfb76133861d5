"""placegym.train: the command line, the demo, training pipelines and benchmarks."""
