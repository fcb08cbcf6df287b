package agent

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/quiverhq/quiver/internal/genai"
	"github.com/quiverhq/quiver/model"
)

// meters are a run's instruments (see Runner.MeterProvider).
type meters struct {
	runs     metric.Int64Counter
	duration metric.Float64Histogram
	tokens   metric.Int64Histogram
}

// newMeters makes the instruments from mp, nil when it records nothing. The SDK hands out the
// same instruments for the same names, so making them per run costs a lookup.
func newMeters(mp metric.MeterProvider) *meters {
	m := genai.Meter(mp)
	if m == nil {
		return nil
	}
	var ms meters
	var err1, err2, err3 error
	ms.runs, err1 = m.Int64Counter(genai.MetricRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Agent runs, by event (started, finished, paused, failed) and agent."))
	ms.duration, err2 = m.Float64Histogram(genai.MetricOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of model requests."), metric.WithExplicitBucketBoundaries(genai.DurationBuckets...))
	ms.tokens, err3 = m.Int64Histogram(genai.MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens of model requests, by type (input, output)."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576))
	if err1 != nil || err2 != nil || err3 != nil {
		return nil // a bad instrument is a bug; the runs go on without metrics
	}
	return &ms
}

func (ms *meters) run(ctx context.Context, agent, event string) {
	ms.runs.Add(ctx, 1, metric.WithAttributes(genai.RunEvent.String(event), genai.AgentName.String(agent)))
}

// chat records one model request of the model named name ("provider:model").
func (ms *meters) chat(ctx context.Context, name string, took time.Duration, resp *model.Response, err error) {
	provider, modelName := splitModel(name)
	attrs := []attribute.KeyValue{genai.Operation.String(genai.OpChat), genai.ProviderName.String(provider), genai.RequestModel.String(modelName)}
	if err != nil {
		ms.duration.Record(ctx, took.Seconds(), metric.WithAttributes(append(attrs, genai.ErrorType.String(errorType(err)))...))
		return
	}
	ms.duration.Record(ctx, took.Seconds(), metric.WithAttributes(attrs...))
	if resp != nil {
		ms.tokens.Record(ctx, resp.Usage.InputTokens, metric.WithAttributes(append(attrs, genai.TokenType.String("input"))...))
		ms.tokens.Record(ctx, resp.Usage.OutputTokens, metric.WithAttributes(append(attrs, genai.TokenType.String("output"))...))
	}
}

// splitModel splits a model's name, "provider:model", into its parts.
func splitModel(name string) (provider, model string) {
	if p, m, ok := strings.Cut(name, ":"); ok {
		return p, m
	}
	return "", name
}
