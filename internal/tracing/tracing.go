// Package tracing sets up OpenTelemetry tracing for the appliance: an
// OTLP/gRPC exporter when an endpoint is configured, and the no-op tracer
// when not, so that a gateway without a collector pays nothing for spans
// (docs/tracing.md). It also carries W3C trace context (traceparent,
// tracestate) in and out of HTTP headers.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the service.name of every span the appliance exports.
const ServiceName = "tollgate"

// Name is the instrumentation scope of the appliance's spans.
const Name = "github.com/tollgate-dev/tollgate"

// Config says where spans go.
type Config struct {
	// Endpoint is the OTLP/gRPC collector (host:port); empty disables
	// tracing.
	Endpoint string
	// Insecure sends spans without TLS (a collector on the host or a
	// trusted network).
	Insecure bool
	// ApplianceID (app_<id>) is a resource attribute of every span.
	ApplianceID string
}

// Provider is the appliance's tracer provider. Its Tracer is a no-op one
// when tracing is disabled.
type Provider struct {
	sdk    *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New returns the provider cfg describes. The exporter connects lazily:
// a collector that is down loses spans (batched, bounded), never requests.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Endpoint == "" {
		return &Provider{tracer: Disabled()}, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint)}
	if cfg.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", cfg.Endpoint, err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", ServiceName), attribute.String("tollgate.appliance_id", cfg.ApplianceID))
	return NewWith(sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))), nil
}

// NewWith wraps an SDK provider (tests give one over an in-memory
// exporter).
func NewWith(tp *sdktrace.TracerProvider) *Provider {
	return &Provider{sdk: tp, tracer: tp.Tracer(Name)}
}

// Tracer is the appliance's tracer.
func (p *Provider) Tracer() trace.Tracer { return p.tracer }

// Enabled reports whether spans are recorded and exported.
func (p *Provider) Enabled() bool { return p.sdk != nil }

// Shutdown flushes the spans still batched and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// Disabled is the no-op tracer.
func Disabled() trace.Tracer { return noop.NewTracerProvider().Tracer(Name) }

// propagator is W3C trace context: traceparent and tracestate.
var propagator = propagation.TraceContext{}

// Extract returns ctx with the remote span context h carries, if any.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject sets h's traceparent (and tracestate) to ctx's span, if it has a
// valid one.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Carrier adapts gRPC-style metadata (lower-case keys, several values) to
// a propagation.TextMapCarrier.
type Carrier map[string][]string

// Get implements propagation.TextMapCarrier.
func (c Carrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (c Carrier) Set(key, value string) { c[key] = []string{value} }

// Keys implements propagation.TextMapCarrier.
func (c Carrier) Keys() []string {
	ks := make([]string, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	return ks
}

// ExtractCarrier is Extract for gRPC metadata.
func ExtractCarrier(ctx context.Context, c Carrier) context.Context {
	return propagator.Extract(ctx, c)
}
