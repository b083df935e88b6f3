"""The commands composed in the library, one module per command: each takes a request value and
returns a value the CLI prints (autotune/tune.py is their public face). The search is split in
its request, its job (values known before the study opens), its study steps and the pipeline."""
