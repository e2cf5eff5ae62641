// Package browsertest drives the developer settings pages (/settings) in a real headless Chromium,
// through chromedp, against the standalone exchange running in-process on a real Postgres. Its
// tests need Debian's chromium (`make chromium`) and fail without it.
//
// With PMX_SCREENSHOT=docs/settings.png (a path relative to the repository root) the test also
// saves a screenshot of the signed-in page at laptop width, and with PMX_SCREENSHOT_PHONE one at
// phone width:
//
//	PMX_SCREENSHOT=docs/settings.png go test -count=1 -run TestSettingsInBrowser ./internal/browsertest/
package browsertest
