"""The OpenTelemetry example's app: traced on both sides, spans printed by the console exporter.

Run the worker with ``taskforge worker tasks:app -c 1`` from this directory
(``pip install 'taskforge-redis[otel]' opentelemetry-sdk``). Both the
producer (``demo.py``) and the worker import this module, so both are
instrumented; each prints its own spans, and together they form one trace.
"""

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from taskforge import TaskForge
from taskforge.contrib.otel import instrument

# The application's own choice of SDK and exporter; taskforge needs only the API.
provider = TracerProvider(resource=Resource.create({"service.name": "otel-example"}))
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
trace.set_tracer_provider(provider)

app = TaskForge("otel-example")
instrument(app)


@app.task(max_attempts=2, backoff=0.2)
def resize(image: str, size: int) -> dict[str, str]:
    """Runs inside the CONSUMER span: anything traced here joins the request's trace."""
    with trace.get_tracer(__name__).start_as_current_span("resize pixels"):
        span = trace.get_current_span().get_span_context()
        return {"thumbnail": f"{image}@{size}", "trace_id": format(span.trace_id, "032x")}
