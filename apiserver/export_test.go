package apiserver

// For the tests of package apiserver_test, which check the feed's messages against the AsyncAPI
// document with internal/apitest (which imports this package, so these tests cannot live in it).
var (
	ParseRequest = parseRequest
	RefDuplicate = refDuplicate
)
