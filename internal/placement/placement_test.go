package placement

import (
	"testing"

	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

func TestTakes(t *testing.T) {
	shared := Unit{Key: "m1"}
	hot := Unit{Key: "e1", Pool: "hot", Dedicated: true}
	for _, tc := range []struct {
		name  string
		shard bookkeeping.Shard
		unit  Unit
		want  bool
	}{
		{"a shard of the default pool takes a shared market of it", bookkeeping.Shard{Pool: "default", Markets: 3}, shared, true},
		{"an empty pool name is the default pool", bookkeeping.Shard{Markets: 3}, Unit{Key: "m1", Pool: "default"}, true},
		{"a draining shard takes nothing", bookkeeping.Shard{Pool: "default", Draining: true}, shared, false},
		{"another pool's shard takes nothing", bookkeeping.Shard{Pool: "hot"}, shared, false},
		{"a dedicated shard takes no other unit", bookkeeping.Shard{Pool: "default", DedicatedTo: "m9", Markets: 1}, shared, false},
		{"a dedicated shard takes its own unit back", bookkeeping.Shard{Pool: "hot", DedicatedTo: "e1", Markets: 2}, hot, true},
		{"a dedicated unit takes an empty shard of its pool", bookkeeping.Shard{Pool: "hot"}, hot, true},
		{"a dedicated unit takes no shard with markets", bookkeeping.Shard{Pool: "hot", Markets: 1, Units: 1}, hot, false},
		{"a dedicated unit takes no shard of another pool", bookkeeping.Shard{Pool: "default"}, hot, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Takes(tc.shard, tc.unit); got != tc.want {
				t.Errorf("Takes(%+v, %+v) = %v, want %v", tc.shard, tc.unit, got, tc.want)
			}
		})
	}
}

func TestChoose(t *testing.T) {
	sh := func(name, pool string, markets int, dedicatedTo string, draining bool) bookkeeping.Shard {
		return bookkeeping.Shard{Name: name, Pool: pool, Markets: markets, Units: markets, DedicatedTo: dedicatedTo, Draining: draining}
	}
	for _, tc := range []struct {
		name   string
		shards []bookkeeping.Shard
		unit   Unit
		want   string // "" for none
		fits   bool
	}{
		{"the least loaded shard of the pool",
			[]bookkeeping.Shard{sh("a", "default", 3, "", false), sh("b", "default", 1, "", false), sh("c", "hot", 0, "", false)},
			Unit{Key: "m"}, "b", true},
		{"ties keep the given order",
			[]bookkeeping.Shard{sh("a", "default", 1, "", false), sh("b", "default", 1, "", false)},
			Unit{Key: "m"}, "a", true},
		{"never a shard dedicated to another unit while a shared one is live",
			[]bookkeeping.Shard{sh("d", "default", 1, "x", false), sh("a", "default", 5, "", false)},
			Unit{Key: "m"}, "a", true},
		{"a shared market on a dedicated shard rather than none",
			[]bookkeeping.Shard{sh("d", "default", 1, "x", false), sh("a", "default", 0, "", true)},
			Unit{Key: "m"}, "d", false},
		{"a dedicated unit gets the empty shard, however loaded the others",
			[]bookkeeping.Shard{sh("a", "hot", 1, "", false), sh("b", "hot", 0, "", false)},
			Unit{Key: "e", Pool: "hot", Dedicated: true}, "b", true},
		{"a dedicated unit with no free shard shares the least loaded shared one",
			[]bookkeeping.Shard{sh("d", "hot", 0, "other", false), sh("a", "hot", 4, "", false), sh("b", "hot", 2, "", false)},
			Unit{Key: "e", Pool: "hot", Dedicated: true}, "b", false},
		{"none when no shard of the pool is live",
			[]bookkeeping.Shard{sh("a", "default", 0, "", false), sh("h", "hot", 0, "", true)},
			Unit{Key: "e", Pool: "hot"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, fits := Choose(tc.shards, tc.unit)
			got := ""
			if i >= 0 {
				got = tc.shards[i].Name
			}
			if got != tc.want || fits != tc.fits {
				t.Errorf("Choose = %q (fits %v), want %q (fits %v)", got, fits, tc.want, tc.fits)
			}
		})
	}
}
