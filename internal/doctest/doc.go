// Package doctest checks the repository's documentation against the repository: the README's
// quickstart runs, top to bottom, against a real pmx dev (TestREADMEQuickstart); the Go programs
// the docs show compile (TestGoProgramsCompile); and every relative link, heading anchor and
// repository path that README.md and docs/*.md name exists (TestLinks, TestPathsNamed). It has
// no code of its own but the tests'.
package doctest
