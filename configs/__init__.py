"""The YAML presets of ``placegym train`` and ``placegym report`` (package data; see
README.md here). A regular package so that it is found under the ``placegym`` package in
editable installs too."""
