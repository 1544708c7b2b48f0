pytest_plugins = ["tests.fixtures.cluster", "tests.fixtures.operators"]
