"""pytest plugin (entry point `hwemu`): a `device` fixture giving a `stack.Device` from env DEV."""
