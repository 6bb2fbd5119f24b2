"""`kraft acls` against live clusters (plain and secured): the examples of Kafka's
documentation (security, "Examples"), what they print as Kafka's AclCommand prints it, and
the ACLs they leave as kafka-python's admin client reads them back."""

from tests.server.cluster_helpers import wait_for


def pattern(resource_type: str, name: str, pattern_type: str = "LITERAL") -> str:
    return f"ResourcePattern(resourceType={resource_type}, name={name}, patternType={pattern_type})"


def entry(principal: str, operation: str, permission: str = "ALLOW", host: str = "*") -> str:
    return f"(principal={principal}, host={host}, operation={operation}, permissionType={permission})"


def block(title: str, entries: list[str]) -> str:
    """Kafka's `title: <newline> <tab>acl<newline><tab>acl <newline>` and its println."""
    return f"{title}: \n " + "\n".join(f"\t{e}" for e in entries) + " \n\n"


def acls_read_back(tools, topic: str, until=lambda acls: True) -> set[str]:
    """Every ACL on `topic` (literal and prefixed patterns), as kafka-python lists them, once
    they satisfy `until`: DescribeAcls is answered by whichever node kafka-python picks, from
    its own metadata image, which follows the controller's commit a moment later (as a Kafka
    broker's authorizer cache does), so a change the tool was told is committed is waited for."""
    seen: set[str] = set()

    def read() -> bool:
        seen.clear()
        seen.update(describe_acls(tools, topic))
        return until(seen)

    wait_for(read, timeout=60, what=f"the ACLs on {topic} as kafka-python reads them")
    return seen


def literal_of(acls: set[str]) -> set[str]:
    return {a for a in acls if "patternType=LITERAL" in a}


def describe_acls(tools, topic: str) -> set[str]:
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
        ResourceType,
    )

    admin = tools.admin()
    try:
        acls, error = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                    ResourcePatternFilter(ResourceType.TOPIC, topic,
                                                                          ACLResourcePatternType.MATCH)))
    finally:
        admin.close()
    assert error.errno == 0, error
    return {f"{pattern(a.resource_pattern.resource_type.name, a.resource_pattern.resource_name, a.resource_pattern.pattern_type.name)} "
            f"{entry(a.principal, a.operation.name, a.permission_type.name, a.host)}" for a in acls}


def test_the_documented_examples(tools):
    topic, group = f"Test-topic-{tools.name}", f"Group-{tools.name}"
    added = tools.kraft("acls", "--add", "--allow-principal", "User:Bob", "--allow-principal", "User:Alice",
                        "--allow-host", "198.51.100.0", "--allow-host", "198.51.100.1", "--operation", "Read",
                        "--operation", "Write", "--topic", topic)
    entries = [entry(p, op, host=h) for p in ("User:Bob", "User:Alice") for op in ("READ", "WRITE")
               for h in ("198.51.100.0", "198.51.100.1")]
    assert (added.returncode, added.stdout) == (0, block(f"Adding ACLs for resource `{pattern('TOPIC', topic)}`",
                                                         entries))
    denied = tools.kraft("acls", "--add", "--allow-principal", "User:*", "--allow-host", "*", "--deny-principal",
                         "User:BadBob", "--deny-host", "198.51.100.3", "--operation", "Read", "--topic", topic)
    assert denied.stdout == block(f"Adding ACLs for resource `{pattern('TOPIC', topic)}`", [
        entry("User:*", "READ"), entry("User:BadBob", "READ", "DENY", "198.51.100.3")])
    producer = tools.kraft("acls", "--add", "--allow-principal", "User:Jane", "--producer", "--topic", topic)
    assert producer.stdout == block(f"Adding ACLs for resource `{pattern('TOPIC', topic)}`", [
        entry("User:Jane", op) for op in ("WRITE", "DESCRIBE", "CREATE")])
    consumer = tools.kraft("acls", "--add", "--allow-principal", "User:Bob", "--consumer", "--topic", topic,
                           "--group", group)
    assert consumer.stdout == (
        block(f"Adding ACLs for resource `{pattern('TOPIC', topic)}`", [entry("User:Bob", op)
                                                                        for op in ("READ", "DESCRIBE")])
        + block(f"Adding ACLs for resource `{pattern('GROUP', group)}`", [entry("User:Bob", "READ")]))
    prefixed = tools.kraft("acls", "--add", "--allow-principal", "User:Jane", "--producer", "--topic", "Test-",
                           "--resource-pattern-type", "prefixed")
    assert prefixed.returncode == 0, prefixed

    # --list prints each resource's ACLs; what they are, kafka-python reads back.
    listed = tools.kraft("acls", "--list", "--topic", topic)
    assert listed.returncode == 0
    title = f"Current ACLs for resource `{pattern('TOPIC', topic)}`: "
    lines = listed.stdout.split("\n")
    assert lines[0] == title and lines[-2:] == ["", ""]
    shown = {f"{pattern('TOPIC', topic)} {line.strip()}" for line in lines[1:-2]}
    literal = literal_of(acls_read_back(tools, topic, lambda acls: literal_of(acls) == shown))
    assert shown == literal and len(shown) == 8 + 2 + 3 + 2
    matching = tools.kraft("acls", "--list", "--topic", topic, "--resource-pattern-type", "match")
    assert f"Current ACLs for resource `{pattern('TOPIC', 'Test-', 'PREFIXED')}`: " in matching.stdout
    only_jane = tools.kraft("acls", "--list", "--topic", topic, "--principal", "User:Jane")
    assert only_jane.stdout == "ACLs for principal `User:Jane`\n" + block(
        f"Current ACLs for resource `{pattern('TOPIC', topic)}`",
        [line.strip() for line in lines[1:-2] if "User:Jane" in line])

    # --remove asks first; "y" on standard input, or --force.
    question = tools.kraft("acls", "--remove", "--allow-principal", "User:Bob", "--allow-principal", "User:Alice",
                           "--allow-host", "198.51.100.0", "--allow-host", "198.51.100.1", "--operation", "Read",
                           "--operation", "Write", "--topic", topic, stdin="y\n")
    assert question.returncode == 0
    assert question.stdout.startswith("Are you sure you want to remove ACLs: \n \t" + entries[0])
    assert question.stdout.endswith(f" \n from resource filter `{pattern('TOPIC', topic)}`? (y/n)\n")
    acls_read_back(tools, topic, lambda acls: not {a for a in acls if "198.51.100.0" in a or "198.51.100.1" in a})
    kept = tools.kraft("acls", "--remove", "--topic", topic, stdin="n\n")
    assert kept.returncode == 0 and acls_read_back(tools, topic)
    assert tools.kraft("acls", "--remove", "--topic", topic, "--force").returncode == 0
    acls_read_back(tools, topic, lambda acls: not literal_of(acls))


def test_through_the_controllers(plain):
    """--bootstrap-controller (KIP-919): the controllers add and list ACLs too."""
    controller = ["--bootstrap-controller", f"127.0.0.1:{plain.cluster.nodes[1].controller_port}"]
    added = plain.kraft("acls", *controller, "--add", "--allow-principal", "User:carol", "--operation", "Describe",
                        "--topic", "via-controller", connect=False)
    assert added.returncode == 0, added
    listed = plain.kraft("acls", *controller, "--list", "--topic", "via-controller", connect=False)
    assert listed.stdout == block(f"Current ACLs for resource `{pattern('TOPIC', 'via-controller')}`",
                                  [entry("User:carol", "DESCRIBE")])


def test_errors_are_kafkas_lines(tools):
    no_principal = tools.kraft("acls", "--add", "--topic", "t", "--operation", "Read")
    assert (no_principal.returncode, no_principal.stderr) == (
        1, "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.\n")
    wrong_operation = tools.kraft("acls", "--add", "--topic", "t", "--allow-principal", "User:a", "--operation",
                                  "ClusterAction")
    assert wrong_operation.stderr.startswith("ResourceType TOPIC only supports operations ")
    bad_principal = tools.kraft("acls", "--add", "--topic", "t", "--allow-principal", "alice")
    assert (bad_principal.returncode, bad_principal.stdout) == (
        1, "Error while executing ACL command: expected a string in format principalType:principalName but got "
           "alice\n")
    no_resource = tools.kraft("acls", "--add", "--allow-principal", "User:a")
    assert no_resource.stderr == ("You must provide at least one resource: --topic <topic> or --cluster or --group "
                                  "<group> or --delegation-token <Delegation Token ID>\n")
    both = tools.kraft("acls", "--list", connect=False)
    assert both.stderr == "One of --bootstrap-server or --bootstrap-controller must be specified\n"


def test_a_user_the_acls_do_not_allow_is_refused(secured):
    """On the secured cluster, a user with no ACL that lets it alter the cluster's ACLs gets
    Kafka's ClusterAuthorizationException line."""
    reader = secured.login_of("reader", "reader-pw")
    refused = secured.kraft("acls", "--bootstrap-server", secured.bootstrap, "--command-config", str(reader), "--add",
                            "--allow-principal", "User:reader", "--operation", "All", "--cluster", connect=False)
    assert refused.returncode == 1
    assert refused.stdout.endswith("Error while executing ACL command: org.apache.kafka.common.errors."
                                   "ClusterAuthorizationException: Authorization failed.\n")
