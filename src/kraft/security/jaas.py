"""The JAAS configuration text Kafka takes in `...sasl.jaas.config`:

    org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s" user_admin="s";

One login module, its control flag, options as key=value (values bare or double-quoted,
backslash escapes inside quotes), and a closing semicolon, as Kafka's JaasConfig reads it.
"""

from dataclasses import dataclass

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasConfigError(ValueError):
    pass


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str]


def _tokens(text: str) -> list[str]:
    """Words, '=' and ';', quoted strings as one word (with its quotes, to tell it from a bare one)."""
    tokens, i = [], 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            tokens.append(c)
            i += 1
        elif c == '"':
            value, i = [], i + 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                value.append(text[i])
                i += 1
            if i >= len(text):
                raise JaasConfigError("a quoted value is not closed")
            tokens.append('"' + "".join(value))
            i += 1
        else:
            start = i
            while i < len(text) and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            tokens.append(text[start:i])
    return tokens


def parse_jaas(text: str) -> JaasEntry:
    """The one login module `text` configures; JaasConfigError saying what is wrong."""
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[-1] != ";":
        raise JaasConfigError("expected '<LoginModule> required key=value ...;' ending with ';'")
    if tokens.count(";") != 1:
        raise JaasConfigError("give exactly one login module (one ';')")
    module, flag, rest = tokens[0], tokens[1].lower(), tokens[2:-1]
    if flag not in FLAGS:
        raise JaasConfigError(f"{tokens[1]!r} is not a control flag ({', '.join(FLAGS)})")
    options: dict[str, str] = {}
    if len(rest) % 3:
        raise JaasConfigError("options must be key=value")
    for key, eq, value in zip(rest[0::3], rest[1::3], rest[2::3]):
        if eq != "=" or key in ("=", ";") or key.startswith('"') or value in ("=", ";"):
            raise JaasConfigError(f"near {key!r}: options must be key=value")
        options[key] = value[1:] if value.startswith('"') else value
    return JaasEntry(module, flag, options)
