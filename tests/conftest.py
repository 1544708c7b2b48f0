from hypothesis import HealthCheck, settings

pytest_plugins = [
    "tests.fixtures.cluster",
    "tests.fixtures.tools",
    "tests.fixtures.opt_in",  # before operators, which imports it
    "tests.fixtures.operators",
    "tests.fixtures.distribution",
]

# Property tests judge behaviour, not speed: on a 2-core machine that also runs control planes
# and operators, one example can take longer than hypothesis' 200 ms default deadline, and its
# too_slow health check would fail a correct test. A test that is about time sets its own.
settings.register_profile("kqueue", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kqueue")
