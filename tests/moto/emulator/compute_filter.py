"""Compute's list `filter`, the forms emulated (anything else is a 400, never a silent match):
  * comparisons `field = value`, `field != value` (values quoted or bare; numbers and booleans
    compare as their JSON text) and `field:*` (the field is set), on dotted paths into the
    resource (a list matches if any element does);
  * regular expressions (RE2, here Python's re, matching the whole field): `field eq literal`
    as the whole filter, the literal unquoted (spaces allowed), 'single' or "double" quoted,
    or `(field eq literal) (field ne literal) ...`;
  * terms side by side or joined by AND, or all joined by OR; NOT; parentheses. AND and OR at
    the same level without parentheses, and `=` forms mixed with `eq` forms, are refused.
"""

import json
import re

from .gcp import GoogleError


TOKEN = re.compile(r"""\s*(?:(?P<open>\()|(?P<close>\))|(?P<quoted>"(?:[^"\\]|\\.)*"|'[^']*')|(?P<op>!=|=|:)|(?P<word>[^\s()"'=!:]+))""")
FIELD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*")
SINGLE_REGEX = re.compile(r"\s*([A-Za-z][\w.]*)\s+(eq|ne)\s+(.+?)\s*", re.S)


def bad(text):
    return GoogleError(400, f"Invalid value for field 'filter': '{text}'. Invalid list filter expression.", "invalid")


def values(resource, field):
    """The field's values as text, None if it is not set."""
    found = [resource]
    for part in field.split("."):
        found = [v for f in found if isinstance(f, dict) and part in f for v in (f[part] if isinstance(f[part], list) else [f[part]])]
    if not found:
        return None
    return [v if isinstance(v, str) else json.dumps(v) for v in found]


def unquote(token):
    """A literal's text: quotes removed (and a double-quoted one's escapes)."""
    if len(token) > 1 and token[0] == token[-1] == '"':
        return re.sub(r"\\(.)", r"\1", token[1:-1])
    return token[1:-1] if len(token) > 1 and token[0] == token[-1] == "'" else token


def regex_term(text, field, op, literal):
    try:
        pattern = re.compile(literal)
    except re.error:
        raise bad(text)
    hit = lambda r: any(pattern.fullmatch(v) for v in values(r, field) or [])  # noqa: E731
    return hit if op == "eq" else (lambda r: not hit(r))


class Parser:
    def __init__(self, text):
        self.text, self.pos, self.tokens, self.forms = text, 0, [], set()
        i = 0
        while i < len(text):
            match = TOKEN.match(text, i)
            if not match or match.end() == i:
                if text[i:].strip():
                    raise bad(text)
                break
            self.tokens.append((match.lastgroup, match.group(match.lastgroup)))
            i = match.end()

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else (None, None)

    def take(self, kind=None, value=None):
        token = self.peek()
        if token[0] is None or (kind and token[0] != kind) or (value and token[1].upper() != value):
            raise bad(self.text)
        self.pos += 1
        return token[1]

    def literal(self):
        kind, value = self.peek()
        if kind not in ("word", "quoted"):
            raise bad(self.text)
        self.pos += 1
        return unquote(value)

    def expression(self):
        terms, joins = [self.term()], set()
        while self.peek()[0] not in (None, "close"):
            kind, value = self.peek()
            if kind == "word" and value.upper() in ("AND", "OR"):
                joins.add(self.take().upper())
            else:
                joins.add("AND")
            terms.append(self.term())
        if len(joins) > 1:
            raise bad(self.text)
        if joins == {"OR"}:
            return lambda r: any(t(r) for t in terms)
        return lambda r: all(t(r) for t in terms)

    def term(self):
        kind, value = self.peek()
        if kind == "word" and value.upper() == "NOT":
            self.take()
            inner = self.term()
            return lambda r: not inner(r)
        if kind == "open":
            self.take()
            inner = self.expression()
            self.take("close")
            return inner
        field = self.take("word")
        if not FIELD.fullmatch(field):
            raise bad(self.text)
        kind, op = self.peek()
        if kind == "word" and op.lower() in ("eq", "ne"):
            self.take()
            self.forms.add("regex")
            return regex_term(self.text, field, op.lower(), self.literal())
        op = self.take("op")
        self.forms.add("compare")
        literal = self.literal()
        if op == ":":
            if literal != "*":
                raise bad(self.text)
            return lambda r: values(r, field) is not None
        if op == "=":
            return lambda r: literal in (values(r, field) or [])
        return lambda r: literal not in (values(r, field) or [])


def compile_filter(text):
    """A predicate on resources for a filter expression; raises GoogleError 400 for forms not
    emulated."""
    if not text.strip():
        return lambda r: True
    single = SINGLE_REGEX.fullmatch(text)
    if single and not text.lstrip().startswith("("):
        field, op, literal = single.groups()
        return regex_term(text, field, op, unquote(literal))
    parser = Parser(text)
    keep = parser.expression()
    if parser.pos != len(parser.tokens) or len(parser.forms) > 1:
        raise bad(text)
    return keep
