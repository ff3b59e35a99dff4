"""Your code, named in config/config.yaml as ``module:attr`` (README, "Make it yours").

This folder and config/ are yours: ``msscaffold update`` never changes them (copier.yml's
``_skip_if_exists``), so an edit here never conflicts with a template release. Add modules as
you like; ``custom.my_module:MyThing`` names anything in them.
"""
