"""Script mode's command: a user's training command as autotune runs it. template.py checks and
fills its {knob} placeholders, scan.py reads the script it runs for lines that defeat a knob.
How a script's run is scored is measurement (measure/script.py)."""
