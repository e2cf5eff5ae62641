// Package marketspec applies the Market CRD's spec (api/v1alpha1.MarketSpec) to the exchange:
// it checks a spec by the CRD's rules, which package v1alpha1 owns (Validate), makes its row and
// records it (Row, Create, Record), reads what it asks for (IntentOf, a market.Intent), and brings
// the database in line with a set of manifests (Sync). The operator and the standalone admin API
// link it; the shards do not, so that a shard links no Kubernetes package (package market holds
// the lifecycle rules they share).
package marketspec

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/records"
)

// SpecError is a market spec that the Market CRD would refuse; Field is the first field at fault,
// and Code the API's code for what is wrong with it.
type SpecError struct {
	Field string
	Code  string
	Err   error
}

func (e *SpecError) Error() string { return e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

// Validate defaults and checks a spec by the Market CRD's rules (package v1alpha1 owns them), so
// that a market made through the admin API obeys what kubectl apply would.
func Validate(spec *v1alpha1.MarketSpec) error {
	m := v1alpha1.Market{Spec: *spec}
	m.Name = "market" // the rules need a name; an admin-created market has none
	m.Default()
	if err := m.Validate(); err != nil {
		first := err
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			first = joined.Unwrap()[0]
		}
		var refusal *domain.Error // a time out of range
		if errors.As(first, &refusal) {
			return &SpecError{Field: refusal.Field, Code: refusal.Code, Err: refusal}
		}
		field, _, _ := strings.Cut(err.Error(), ":")
		field = strings.TrimPrefix(strings.TrimPrefix(field, "spec"), ".")
		if field == "" {
			field = "resolvesAt" // the rule spanning closesAt and resolvesAt
		}
		return &SpecError{Field: field, Code: "invalid_value", Err: errors.New(strings.ReplaceAll(err.Error(), "spec.", ""))}
	}
	*spec = m.Spec
	return nil
}

// Create validates a spec and stores a new OPEN market; name is the metadata.name of the manifest
// or resource it comes from, if any.
func Create(ctx context.Context, st Rows, spec v1alpha1.MarketSpec, name *string, now time.Time) (records.Market, error) {
	if err := Validate(&spec); err != nil {
		return records.Market{}, err
	}
	return st.CreateMarket(ctx, Row(uuid.New(), spec, name, now))
}

// Row is the stored form of a market defined by spec.
func Row(id uuid.UUID, spec v1alpha1.MarketSpec, name *string, now time.Time) records.Market {
	optional := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	var closes, resolves *time.Time
	if spec.ClosesAt != nil {
		t := spec.ClosesAt.UTC().Truncate(time.Microsecond)
		closes = &t
	}
	if spec.ResolvesAt != nil {
		t := spec.ResolvesAt.UTC().Truncate(time.Microsecond)
		resolves = &t
	}
	return records.Market{
		ID: id, Name: name, Question: spec.Question, Description: optional(spec.Description),
		Category: spec.Category, URL: optional(spec.URL), LabelA: spec.LabelA, LabelB: spec.LabelB,
		ClosesAt: closes, ResolvesAt: resolves, CreatedAt: now.UTC().Truncate(time.Microsecond),
	}
}

// IntentOf is what a Market resource or manifest asks of its market.
func IntentOf(spec *v1alpha1.MarketSpec) market.Intent {
	in := market.Intent{Closed: spec.Closed, Resolution: string(spec.Resolution)}
	if spec.ClosesAt != nil {
		t := spec.ClosesAt.Time
		in.ClosesAt = &t
	}
	return in
}
