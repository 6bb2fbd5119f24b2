import pytest

from .tool_clusters import plain_cluster, secured_cluster


@pytest.fixture(scope="session")
def plain(tmp_path_factory):
    """Three voters and an observer, PLAINTEXT (tool_clusters.py); started once, on first use."""
    yield from plain_cluster(tmp_path_factory.mktemp("plain-tools"))


@pytest.fixture(scope="session")
def secured(tmp_path_factory):
    """A voter and an observer, SASL_SSL with SCRAM and the authorizer (tool_clusters.py)."""
    yield from secured_cluster(tmp_path_factory.mktemp("secured-tools"))


@pytest.fixture(params=["plain", "secured"])
def tools(request):
    """Each of the two clusters in turn."""
    return request.getfixturevalue(request.param)
