"""Tests run against private hubs from the package's own pytest plugin
(the ``fieldhub_hub`` fixture), so they need nothing running beforehand."""
