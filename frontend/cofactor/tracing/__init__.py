"""Tracing Python into IR: the tracer, the numpy rules, the trace context, QNode capture."""
