package auth

import (
	"errors"
	"regexp"
)

// accountName is what an account may be called.
var accountName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// errAccountName says what an account name must be.
var errAccountName = errors.New("name must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit")

// CheckAccountName says what is wrong with a new account's name, or nil when it may be used.
func CheckAccountName(name string) error {
	if !accountName.MatchString(name) {
		return errAccountName
	}
	return nil
}
