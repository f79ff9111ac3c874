"""Stand-in for smolagents.tools: Tool, its requirements (third-party
modules its methods import) and the code that defines tools remotely."""
import ast
import inspect
import sys
import textwrap

from .local_python_executor import BASE_BUILTIN_MODULES


def _method_source(fn):
    src = getattr(fn, "__source__", None) or inspect.getsource(fn)
    return textwrap.dedent(src)


def _methods(cls):
    """(name, function) defined by cls and its bases below Tool, most derived first."""
    seen = {}
    for klass in cls.__mro__:
        if klass is Tool or klass is object:
            break
        for name, fn in vars(klass).items():
            if inspect.isfunction(fn) and name not in seen:
                seen[name] = fn
    return list(seen.items())


class Tool:
    name = ""
    description = ""
    inputs = {}
    output_type = "any"

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def source(self):
        cls = type(self)
        lines = ["class %s(Tool):" % cls.__name__]
        for attr in ("name", "description", "inputs", "output_type"):
            lines.append("    %s = %r" % (attr, getattr(self, attr)))
        for _, fn in _methods(cls):
            lines.append(textwrap.indent(_method_source(fn), "    "))
        return "\n".join(lines) + "\n"

    def to_dict(self):
        code = self.source()
        mods = set()
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                mods.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods.add(node.module.split(".")[0])
        reqs = sorted(m for m in mods if m not in sys.stdlib_module_names)
        return {"name": self.name, "code": code, "requirements": reqs + ["smolagents"]}


def get_tools_definition_code(tools):
    parts = ["import %s" % m for m in BASE_BUILTIN_MODULES]
    parts.append(textwrap.dedent("""
        class Tool:
            def __call__(self, *args, **kwargs):
                return self.forward(*args, **kwargs)

            def forward(self, *args, **kwargs):
                pass
        """))
    for tool in tools.values():
        parts.append(tool.source())
        parts.append("%s = %s()\n" % (tool.name, type(tool).__name__))
    return "\n".join(parts)
