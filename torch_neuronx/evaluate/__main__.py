"""``python -m torch_neuronx.evaluate TARGET``: see cli.py or ``--help``."""
import sys

from .cli import main

sys.exit(main())
