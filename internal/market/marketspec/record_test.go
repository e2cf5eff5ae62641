package marketspec

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestRecord(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := func(q string) v1alpha1.MarketSpec { return v1alpha1.MarketSpec{Question: q, Category: "weather"} }

	// First sight of a name creates an OPEN market, with the spec's defaults.
	first, created, err := Record(ctx, st, uuid.Nil, "default/rain", spec("Will it rain?"), now)
	if err != nil || !created || first.Status != domain.MarketOpen || first.Question != "Will it rain?" ||
		first.LabelA != "Yes" || first.Name == nil || *first.Name != "default/rain" {
		t.Fatalf("Record(new) = %+v, created %v, %v", first, created, err)
	}

	// A time past year 9999 in UTC, which Postgres would store but no answer could carry.
	far := metav1.NewTime(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	farSpec := func(q string, closes bool) v1alpha1.MarketSpec {
		s := spec(q)
		if closes {
			s.ClosesAt = &far
		} else {
			s.ResolvesAt = &far
		}
		return s
	}

	tests := []struct {
		name     string
		id       uuid.UUID
		market   string
		spec     v1alpha1.MarketSpec
		created  bool
		sameID   bool   // the market recorded first
		question string // what the market asks afterwards
		field    string // the field of a *SpecError, if one is expected
	}{
		{"same name, new text", uuid.Nil, "default/rain", spec("Will it rain today?"), false, true, "Will it rain today?", ""},
		{"by id", first.ID, "default/rain", spec("Will it pour?"), false, true, "Will it pour?", ""},
		{"invalid spec changes nothing", first.ID, "default/rain", spec(""), false, true, "Will it pour?", "question"},
		{"unknown id creates", uuid.New(), "default/snow", spec("Will it snow?"), true, false, "Will it snow?", ""},
		{"invalid new spec creates nothing", uuid.Nil, "default/hail", spec(""), false, false, "", "question"},
		{"NUL changes nothing", first.ID, "default/rain", spec("Will it\x00 pour?"), false, true, "Will it pour?", "question"},
		{"NUL creates nothing", uuid.Nil, "default/sleet", spec("Will it\x00 sleet?"), false, false, "", "question"},
		{"invalid UTF-8 creates nothing", uuid.Nil, "default/fog", spec("Will it \xff fog?"), false, false, "", "question"},
		{"closesAt past year 9999 changes nothing", first.ID, "default/rain", farSpec("Will it pour later?", true), false, true, "Will it pour?", "closesAt"},
		{"resolvesAt past year 9999 creates nothing", uuid.Nil, "default/mist", farSpec("Will it mist?", false), false, false, "", "resolvesAt"},
	}
	for _, tt := range tests {
		m, created, err := Record(ctx, st, tt.id, tt.market, tt.spec, now.Add(time.Minute))
		var se *SpecError
		if tt.field != "" {
			if !errors.As(err, &se) || se.Field != tt.field || created {
				t.Errorf("%s: Record() = created %v, %v; want a *SpecError on %s", tt.name, created, err, tt.field)
			} else if strings.HasSuffix(tt.field, "At") && se.Code != "out_of_range" {
				t.Errorf("%s: a time out of range refused with code %q", tt.name, se.Code)
			}
		} else if err != nil || created != tt.created {
			t.Errorf("%s: Record() = created %v, %v; want created %v", tt.name, created, err, tt.created)
		}
		if tt.question == "" {
			if _, err := st.MarketByName(ctx, tt.market); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: market %s exists (%v)", tt.name, tt.market, err)
			}
			continue
		}
		stored, err := st.MarketByName(ctx, tt.market)
		if err != nil || stored.Question != tt.question || (stored.ID == first.ID) != tt.sameID {
			t.Errorf("%s: stored %+v (%v); want question %q, the first market %v", tt.name, stored, err, tt.question, tt.sameID)
		}
		if tt.field == "" && (m.ID != stored.ID || m.Question != stored.Question) {
			t.Errorf("%s: Record returned %+v, the store holds %+v", tt.name, m, stored)
		}
	}
}
