package server

import (
	"net/http"
)

// unprocessableIfMissing makes a missing_variables answer of thread creation and run start a
// 422: the request is well formed, and what stops it is the state of the variables it needs,
// which the problem's fields name one by one. Other answers pass unchanged.
func unprocessableIfMissing(answer error) error {
	if p, ok := answer.(*ProblemDetails); ok && p.Code == CodeMissingVariables {
		p.Status, p.Title = http.StatusUnprocessableEntity, http.StatusText(http.StatusUnprocessableEntity)
	}
	return answer
}
