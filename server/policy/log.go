package policy

import (
	"context"
	"log/slog"
)

// logDecision writes the decision log line: one per decision, allow or deny.
func (e *Engine) logDecision(ctx context.Context, in *Input, d *Decision) {
	level := slog.LevelInfo
	if !e.log.Enabled(ctx, level) {
		return
	}
	// Room for every attribute, so that the slice stays on the stack.
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("decision_id", d.ID),
		slog.Bool("allow", d.Allow),
		slog.String("reason", d.Reason),
		slog.String("tenant_id", in.Key.TenantID),
		slog.String("key_id", in.Key.KeyID),
		slog.String("request_id", in.Request.ID),
		slog.String("model", in.Request.Model),
		slog.String("bundle_revision", d.BundleRevision),
		slog.String("bundle_digest", d.BundleDigest),
	)
	if d.DeniedBy != DeniedByNone {
		attrs = append(attrs, slog.String("denied_by", string(d.DeniedBy)))
	}
	if len(d.AllowedTools) > 0 {
		attrs = append(attrs, slog.Any("allowed_tools", d.AllowedTools))
	}
	if len(d.DeniedTools) > 0 {
		attrs = append(attrs, slog.Any("denied_tools", d.DeniedTools))
	}
	e.log.LogAttrs(ctx, level, "policy decision", attrs...)
}

// logEvalError reports a bundle that failed to evaluate for a request.
func (e *Engine) logEvalError(ctx context.Context, in *Input, b *Bundle, err error) {
	e.log.LogAttrs(ctx, slog.LevelError, "policy evaluation failed",
		slog.String("tenant_id", in.Key.TenantID),
		slog.String("key_id", in.Key.KeyID),
		slog.String("request_id", in.Request.ID),
		slog.String("bundle_revision", b.revision),
		slog.String("bundle_digest", b.digest),
		slog.String("error", err.Error()))
}
