package access

import (
	"google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
)

// ApplianceRules are the rules of the appliance's gRPC listener, every
// method of each service alike:
//
//   - KeysService and PolicyService: operators only. Tenants' administrators
//     manage their keys in the operator portal.
//   - AuditService: an audit token of the tenant the request names.
//   - InferenceService: untouched; it authenticates its virtual key itself.
//   - health (grpc.health.v1) and server reflection (v1 and v1alpha):
//     public.
func ApplianceRules() Rules {
	return Rules{}.
		Service(&keysv1.KeysService_ServiceDesc, Operator).
		Service(&policyv1.PolicyService_ServiceDesc, Operator).
		Service(&auditv1.AuditService_ServiceDesc, TenantAuditor).
		Service(&inferencev1.InferenceService_ServiceDesc, SelfAuthenticated).
		Service(&grpc_health_v1.Health_ServiceDesc, Public).
		Service(&reflectionv1.ServerReflection_ServiceDesc, Public).
		Service(&reflectionv1alpha.ServerReflection_ServiceDesc, Public)
}
