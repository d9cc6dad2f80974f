"""Which module runs the demo's remote services, for ``sas up``, ``sas demo`` and ``sas services
serve``: the one an installed package names in the ``sas.demo_services`` entry point group
(``examples/demo_services`` does), run as ``python -m MODULE``. sas does not hold the services
and names no package of them; when none is installed, one line says what to install."""

from __future__ import annotations

from importlib.metadata import entry_points

DEMO_SERVICES_ENTRY_POINT_GROUP = "sas.demo_services"
INSTALL_HINT = "pip install -e examples/demo_services"


class DemoServicesMissing(RuntimeError):
    """No installed package declares the demo services (or more than one does)."""


def demo_services_module() -> str:
    """The module to run with ``python -m`` to serve the demo services.

    Raises:
        DemoServicesMissing: When no package declares them, or several do.
    """
    points = sorted(entry_points(group=DEMO_SERVICES_ENTRY_POINT_GROUP), key=lambda p: (p.value, p.name))
    if not points:
        raise DemoServicesMissing(
            f"the demo services are not installed (no {DEMO_SERVICES_ENTRY_POINT_GROUP} entry point): {INSTALL_HINT}"
        )
    if len({p.value for p in points}) > 1:
        named = ", ".join(f"{p.name} = {p.value}" for p in points)
        raise DemoServicesMissing(f"more than one package declares the demo services ({named}): uninstall all but one")
    return points[0].module
