package v1alpha1

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/pmx-dev/pmx/internal/domain"
)

// The defaults the CRD applies to a Market's spec.
const (
	DefaultLabelA = "Yes"
	DefaultLabelB = "No"
)

// Length limits of the CRD schema, in characters; they must match the markers on MarketSpec.
const (
	maxQuestion    = 500
	maxDescription = 10000
	maxCategory    = 100
	maxURL         = 2048
	maxLabel       = 50
	maxShardPool   = 46
)

// shardPoolName is the pattern of spec.shardPool, the CRD's (and a ShardPool's metadata.name's).
var shardPoolName = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// Default sets what the CRD defaults when a field is absent: labelA "Yes" and labelB "No". A typed
// Market cannot tell an absent label from an empty one, so both are defaulted here.
func (m *Market) Default() {
	if m.Spec.LabelA == "" {
		m.Spec.LabelA = DefaultLabelA
	}
	if m.Spec.LabelB == "" {
		m.Spec.LabelB = DefaultLabelB
	}
}

// Validate checks a new Market, after Default, against what the apiserver checks on create and
// can be checked without one: metadata.name and namespace, the required fields, lengths, the
// resolution enum, the url rule, the fee schedule's ranges and rule, times within the exchange's
// range (domain.CheckTime) and closesAt before resolvesAt. Beyond the CRD, which cannot say it,
// every text field must be what Postgres text can hold: valid UTF-8 without NUL. Transition
// rules (a resolution cannot change) need the old object and are left to the apiserver or the
// caller. The error, if any, joins one error per problem, each starting with the field's path.
func (m *Market) Validate() error {
	return errors.Join(m.problems()...)
}

func (m *Market) problems() []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}

	if m.Name == "" {
		add("metadata.name", "required")
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
			add("metadata.name", "%q: %s", m.Name, msg)
		}
	}
	if m.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(m.Namespace) {
			add("metadata.namespace", "%q: %s", m.Namespace, msg)
		}
	}

	s := &m.Spec
	length := func(field, value string, minLen, maxLen int) {
		switch n := utf8.RuneCountInString(value); {
		case !utf8.ValidString(value):
			add(field, "must be valid UTF-8 (the database stores only that); send text encoded as UTF-8")
		case strings.IndexByte(value, 0) >= 0:
			add(field, "must not contain a NUL character (U+0000; the database cannot store it); remove it")
		case n == 0 && minLen > 0:
			add(field, "required")
		case n < minLen:
			add(field, "must be at least %d characters", minLen)
		case n > maxLen:
			add(field, "must be at most %d characters (it has %d)", maxLen, n)
		}
	}
	length("spec.question", s.Question, 1, maxQuestion)
	length("spec.description", s.Description, 0, maxDescription)
	length("spec.category", s.Category, 1, maxCategory)
	length("spec.labelA", s.LabelA, 1, maxLabel)
	length("spec.labelB", s.LabelB, 1, maxLabel)
	if s.URL != "" {
		length("spec.url", s.URL, 0, maxURL)
		if !isHTTPURL(s.URL) {
			add("spec.url", "%q: must be an absolute http or https URL", s.URL)
		}
	}
	switch s.Resolution {
	case "", ResolutionYes, ResolutionNo, ResolutionCanceled:
	default:
		add("spec.resolution", "%q: must be one of %s, %s, %s", s.Resolution, ResolutionYes, ResolutionNo, ResolutionCanceled)
	}
	if f := s.Fees; f != nil {
		errs = append(errs, f.problems("spec.fees")...)
	}
	if err := CheckShardPool(s.ShardPool); err != nil {
		add("spec.shardPool", "%v", err)
	}
	if err := s.Placement.Check(); err != nil {
		add("spec.placement", "%v", err)
	}
	// The CRD's rule on each time (XValidation on ClosesAt and ResolvesAt) says the same bound.
	for _, t := range []struct {
		name string
		at   *metav1.Time
	}{{"closesAt", s.ClosesAt}, {"resolvesAt", s.ResolvesAt}} {
		if t.at != nil {
			if err := domain.CheckTime(t.name, t.at.Time); err != nil {
				errs = append(errs, fmt.Errorf("spec.%s: %w", t.name, err))
			}
		}
	}
	if s.ClosesAt != nil && s.ResolvesAt != nil && !s.ClosesAt.Before(s.ResolvesAt) {
		add("spec", "closesAt must be before resolvesAt")
	}
	return errs
}

// CheckShardPool checks a spec.shardPool by the CRD's markers on it, which a Market, an Event and
// a MarketSeries share: empty (the default pool), or the name a ShardPool may have. The error
// says what is wrong, without the field's path.
func CheckShardPool(pool string) error {
	if pool != "" && (len(pool) > maxShardPool || !shardPoolName.MatchString(pool)) {
		return fmt.Errorf("%q: must name a ShardPool: at most %d lower-case letters, digits and '-', starting with a letter and ending with a letter or digit", pool, maxShardPool)
	}
	return nil
}

// Check checks a spec.placement by the CRD's enum, which a Market, an Event and a MarketSeries
// share: empty (Shared), Shared or Dedicated. The error says what is wrong, without the field's
// path.
func (p Placement) Check() error {
	switch p {
	case "", PlacementShared, PlacementDedicated:
		return nil
	}
	return fmt.Errorf("%q: must be %s or %s", p, PlacementShared, PlacementDedicated)
}

// isHTTPURL mirrors the CRD's rule for spec.url, `isURL(self) && url(self).getScheme() in ['http',
// 'https']`, whose CEL functions are built on url.ParseRequestURI.
func isHTTPURL(s string) bool {
	u, err := url.ParseRequestURI(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https")
}

// Check checks a schedule by the CRD's rules on FeeSchedule, as a Market's Validate does its own:
// for where no API server has applied them (pmx dev's Event manifests, a MarketSeries' Event
// template). field is the schedule's path in the messages, "spec.fees".
func (f *FeeSchedule) Check(field string) error { return errors.Join(f.problems(field)...) }

// problems checks a schedule by the CRD's markers on FeeSchedule: each rate's range, then the rule
// that makerBps lies between -takerBps and takerBps. field is the schedule's path.
func (f *FeeSchedule) problems(field string) []error {
	var errs []error
	if f.TakerBps < 0 || f.TakerBps > MaxFeeBps {
		errs = append(errs, fmt.Errorf("%s.takerBps: %d: must be from 0 to %d basis points", field, f.TakerBps, MaxFeeBps))
	}
	if f.MakerBps < -MaxFeeBps || f.MakerBps > MaxFeeBps {
		errs = append(errs, fmt.Errorf("%s.makerBps: %d: must be from %d to %d basis points", field, f.MakerBps, -MaxFeeBps, MaxFeeBps))
	}
	if len(errs) == 0 && (f.MakerBps < -f.TakerBps || f.MakerBps > f.TakerBps) {
		errs = append(errs, fmt.Errorf("%s: %s", field, FeeRuleMessage))
	}
	return errs
}
