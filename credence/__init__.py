"""credence: user-steered evidence memory for AI chat characters.

The code lives in the design card's top-level folders (streams/, tables/, sinks/, config/), installed
under this one import root as credence.streams, credence.tables, credence.sinks and credence.config.
"""

__version__ = "0.1.0"
