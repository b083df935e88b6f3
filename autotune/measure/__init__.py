"""Measure: statistics over what ranks measured (pure), how busy their cores were, when a losing
trial may stop early, what a script reported or printed, and what a rank really ran with (seen
from outside). The quality arithmetic is quality/'s; a script's command template is script/'s."""
