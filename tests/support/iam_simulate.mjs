// Evaluates IAM requests with @cloud-copilot/iam-simulate (AWS's documented evaluation logic; tests/support/iam_check.py
// prepares the requests and reads the answers). Input: a JSON file named by the first argument,
//   {requests: [{principal, action, resource, account, context, identity: [statement ids], resourcePolicy: id|null}],
//    statements: {id: statement}, resourcePolicies: {id: policy}}
// Output (stdout): one answer per request, in order: {result, error?, used: [[statement id, action, resource]]}, where
// `used` names the action and resource patterns of each Allow statement that matched.
import { readFileSync } from 'node:fs'
import { runSimulation } from '@cloud-copilot/iam-simulate'

const input = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const asList = (value) => (value === undefined ? [] : Array.isArray(value) ? value : [value])

async function evaluate(request) {
  const simulation = {
    request: {
      principal: request.principal,
      action: request.action,
      resource: { resource: request.resource, accountId: request.account },
      contextVariables: request.context,
    },
    // One policy per statement: the answer then names each statement that allowed.
    identityPolicies: request.identity.map((id) => ({
      name: id,
      policy: { Version: '2012-10-17', Statement: [input.statements[id]] },
    })),
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    resourcePolicy: request.resourcePolicy ? input.resourcePolicies[request.resourcePolicy] : undefined,
  }
  const answer = await runSimulation(simulation, {})
  if (answer.errors) {
    return { result: 'error', error: JSON.stringify(answer.errors), used: [] }
  }
  const analysis = answer.result.analysis
  const used = []
  for (const allowed of analysis.identityAnalysis?.allowStatements ?? []) {
    const actions = asList(allowed.explain.actions).filter((a) => a.matches).map((a) => a.action)
    const resources = asList(allowed.explain.resources).filter((r) => r.matches).map((r) => r.resource)
    for (const action of actions) {
      for (const resource of resources) {
        used.push([allowed.policyId, action, resource])
      }
    }
  }
  return { result: analysis.result, used }
}

const answers = []
for (const request of input.requests) {
  answers.push(await evaluate(request))
}
process.stdout.write(JSON.stringify(answers))
