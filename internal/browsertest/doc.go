// Package browsertest drives the developer settings pages (/settings) and the public market and
// event pages (/markets, /markets/{id}, /events, /events/{id}) in a real headless Chromium, through chromedp, against the standalone
// exchange running in-process on a real Postgres. Its tests need Debian's chromium (`make
// chromium`) and fail without it.
//
// With PMX_SCREENSHOT=docs/settings.png (a path relative to the repository root) the test also
// saves a screenshot of the signed-in page at laptop width, and with PMX_SCREENSHOT_PHONE one at
// phone width:
//
//	PMX_SCREENSHOT=docs/settings.png go test -count=1 -run TestSettingsInBrowser ./internal/browsertest/
//
// The market pages' test saves screenshots of the list, a market at laptop width and a market at
// phone width when PMX_SCREENSHOT_MARKETS, PMX_SCREENSHOT_MARKET and PMX_SCREENSHOT_MARKET_PHONE
// name where:
//
//	PMX_SCREENSHOT_MARKETS=docs/img/markets.png PMX_SCREENSHOT_MARKET=docs/img/market-page.png \
//	PMX_SCREENSHOT_MARKET_PHONE=docs/img/market-page-phone.png \
//	  go test -count=1 -run TestMarketPagesInBrowser ./internal/browsertest/
//
// The event pages' test saves an event of four outcomes trading at laptop and at phone width when
// PMX_SCREENSHOT_EVENT and PMX_SCREENSHOT_EVENT_PHONE name where:
//
//	PMX_SCREENSHOT_EVENT=docs/event-page.png go test -count=1 -run TestEventPagesInBrowser ./internal/browsertest/
package browsertest
