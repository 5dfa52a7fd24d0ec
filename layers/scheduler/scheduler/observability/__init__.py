"""What an operator sees: metrics (CloudWatch EMF), OpenTelemetry spans, and drivers wrapped in both."""
