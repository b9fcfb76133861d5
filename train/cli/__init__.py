"""The ``placegym`` command line, one module per subcommand.

:mod:`~placegym.train.cli.main` builds the parser, runs a command and turns bad input
into one line on stderr with exit code 2; it also holds the small file commands
(``simulate``, ``show``, ``validate``, ``clusters``). The others each have a module:
``graphs`` (:mod:`.graphs`), ``bench`` (:mod:`.bench`), ``suites`` (:mod:`.suites`),
``anytime`` (:mod:`.anytime`), ``calibrate`` (:mod:`.calibrate`), ``train``
(:mod:`.train`), ``report`` (:mod:`.report`) and ``demo`` (:mod:`.demo`).
"""

from placegym.train.cli.main import main

__all__ = ["main"]
