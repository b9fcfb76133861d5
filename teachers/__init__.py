"""placegym.teachers: heuristic and exact placers (critical path, HEFT, NEST DP, ...)."""
