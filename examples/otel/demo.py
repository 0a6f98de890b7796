"""The producer's side: a "request" span, a job sent inside it, and the trace id the worker saw.

Start the worker first (``taskforge worker tasks:app -c 1``), then
``python demo.py``. The worker's console shows its ``process`` span and the
task's own ``resize pixels`` span, with the trace id printed here.
"""

from opentelemetry import trace
from tasks import resize

tracer = trace.get_tracer("web")

with tracer.start_as_current_span("POST /thumbnails") as request:
    handle = resize.delay("cat.jpg", 128)
    request_trace = format(request.get_span_context().trace_id, "032x")

print(f"request trace: {request_trace}")
print(f"job headers:   {handle.info().headers}")
result = handle.result(timeout=30)
print(f"worker trace:  {result['trace_id']}")
print(f"same trace: {result['trace_id'] == request_trace}")
