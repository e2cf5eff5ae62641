package domain

// MaxClientOrderID bounds a client order id.
const MaxClientOrderID = 64

// ClientOrderIDRule is ValidClientOrderID's rule in words, for the errors that refuse an id.
const ClientOrderIDRule = "1 to 64 characters of A-Z, a-z, 0-9 and . _ : -"

// ValidClientOrderID is true of 1 to MaxClientOrderID characters of A-Za-z0-9._:- . It is the one
// rule for a client order id: the API's decoder checks it, and so does the shard's internal API,
// for an id a database column, a log line and the feed all carry as it is.
func ValidClientOrderID(s string) bool {
	if s == "" || len(s) > MaxClientOrderID {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
