# tools: rules added by the issue that fills this directory.
