"""Test-wide settings. In CI (CI=true) hypothesis runs derandomized, so a submission's result does not depend
on the draw; locally it keeps exploring new examples (and its database replays past failures)."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
