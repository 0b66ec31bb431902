"""``prism run --otel``: the OpenTelemetry SDK set up from the standard environment variables.

``OTEL_TRACES_EXPORTER`` names the exporters, comma-separated (default ``otlp``, as the
OpenTelemetry specification says; ``none`` exports nothing). Each name is loaded through the
``opentelemetry_traces_exporter`` entry points that exporter packages register (``otlp`` by
``opentelemetry-exporter-otlp``), and the exporter reads its own settings
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, ...). ``console`` writes each
span as JSON to standard error, never standard output, so ``--json`` output stays clean. The
resource takes ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (service name ``prism`` when
unset); ``OTEL_SDK_DISABLED=true`` turns tracing off. Spans follow [`prism.otel`][prism.otel].
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import IO, Any

from prism.cli._settings import UsageError

__all__ = ["start_tracing"]

_GROUP = "opentelemetry_traces_exporter"
_PACKAGES = {
    "otlp": "opentelemetry-exporter-otlp",
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
    "zipkin": "opentelemetry-exporter-zipkin",
}


def start_tracing(err: IO[str], environ: Mapping[str, str]) -> Callable[[], None]:
    """Trace every run of this command into the exporters the environment names.

    Args:
        err: Standard error (where ``console`` spans go).
        environ: The environment (``OTEL_*`` variables).

    Returns:
        The function to call when the command is done: it flushes and shuts the exporters down
        and turns default tracing off again.

    Raises:
        UsageError: ``opentelemetry-api`` or ``opentelemetry-sdk`` is not installed, or an
            exporter name has no installed exporter (the message names the package to install).
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return _nothing
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )

        from prism.otel import instrument, uninstrument
    except ImportError:
        raise UsageError(
            "--otel needs the OpenTelemetry SDK: pip install 'prism-runtime[otel]' "
            "opentelemetry-sdk (and an exporter, e.g. opentelemetry-exporter-otlp)"
        ) from None
    names = [
        name.strip().lower()
        for name in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if name.strip()
    ]
    processors: list[Any] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":
            processors.append(SimpleSpanProcessor(ConsoleSpanExporter(out=err)))
            continue
        exporter_class = _exporter_class(name)
        try:
            processors.append(BatchSpanProcessor(exporter_class()))
        except Exception as exc:
            raise UsageError(
                f"--otel: the {name} exporter could not be created: {type(exc).__name__}: {exc}"
            ) from None
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "prism"}))
    provider = TracerProvider(resource=resource)
    for processor in processors:
        provider.add_span_processor(processor)
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # the host's own libraries (a --tool MODULE:ATTR that traces) use the same provider
        trace.set_tracer_provider(provider)
    instrument(tracer_provider=provider)

    def stop() -> None:
        uninstrument()
        provider.shutdown()

    return stop


def _exporter_class(name: str) -> Callable[[], Any]:
    """The exporter class an ``opentelemetry_traces_exporter`` entry point names."""
    for entry in entry_points(group=_GROUP):
        if entry.name == name:
            loaded: Callable[[], Any] = entry.load()
            return loaded
    package = _PACKAGES.get(name, f"a package providing the {name!r} trace exporter")
    raise UsageError(
        f"--otel: OTEL_TRACES_EXPORTER names {name!r}, but no such exporter is installed: "
        f"pip install {package}"
    )


def _nothing() -> None:
    return None
