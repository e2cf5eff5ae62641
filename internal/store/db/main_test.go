package db_test

import (
	"testing"

	"github.com/pmx-dev/pmx/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
