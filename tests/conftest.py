pytest_plugins = ["tests.fixtures.cluster"]
