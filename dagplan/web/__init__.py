"""The run viewer (``dagplan serve``): see :mod:`.app`."""
