"""Workload specs: the YAML files in this folder and the loader that validates them."""
