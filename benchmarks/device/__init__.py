"""The GPU machine's run and kit (issues 32, 33, 45): scripts/device-kit.sh makes the kit here,
scripts/device-run.sh installs it there and runs the phases.

  run         the phases (machine, gpu, cpu, resnet50, windows, landscape), each time-boxed, each
              leaving its results as soon as a step ends (`python -m benchmarks.device.run`)
  kit         the kit's parts made in Python: oneCCL and our backend compiled for that machine's
              torch, and the size check of what travels (`python -m benchmarks.device.kit`)
  wheels.txt  the wheels the kit carries
"""
