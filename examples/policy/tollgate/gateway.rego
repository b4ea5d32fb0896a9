# Tollgate default policy bundle.
#
# Tollgate evaluates data.tollgate.gateway.decision once per request, after
# it has checked in Go that the key allows the model and that every offered
# tool (and a tool named by tool_choice) is covered by a tool:<name> or
# tool:* scope of the key. Those checks cannot be switched off by a bundle:
# a bundle can only deny more, or narrow the tools exposed to the model.
#
# This bundle adds one example rule to the scope checks. Copy the directory
# to start your own; the input and output documents are described in
# docs/policy.md.
package tollgate.gateway

# deny collects the reasons to refuse a request; any one of them denies.
#
# This bundle was written for version 1 of the input document. The version
# is a literal, not a rule (input_version := 1): every rule a decision
# refers to is evaluated on every decision, which costs more than the
# comparison itself.
deny contains msg if {
	input.version != 1
	msg := sprintf("the policy bundle does not understand input version %v", [input.version])
}

# Example rule: keys labelled "ci" run unattended jobs and get no tools.
deny contains "keys labelled ci may not use tools" if {
	input.key.label == "ci"
	count(input.request.tools) > 0
}

# decision is the document Tollgate reads: allow, a reason, and optionally
# "tools", the subset of input.request.tools to expose (absent: all).
decision := {"allow": false, "reason": concat("; ", sort(deny))} if {
	count(deny) > 0
} else := {"allow": true, "reason": "allowed"}
