-- Argo CD health check for Shoal's custom resources. One script serves the three
-- kinds of shoal.dev/v1alpha1 (InferenceModel, TenantPool, BatchPolicy): each reports
-- status.observedGeneration and the kstatus conditions Ready, Reconciling and Stalled.
-- manifests/argocd/argocd-cm-health.yaml carries it; regenerate that file with
-- `python -m e2e.argocd_health --write` after editing this one.
-- Only the base and table libraries are used: Argo CD opens no string library.
local hs = {status = "Progressing", message = "Waiting for the operator to report status."}
local generation = obj.metadata.generation
local status = obj.status
if status == nil or status.observedGeneration == nil then
  return hs
end
if status.observedGeneration ~= generation then
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation) .. "."
  return hs
end

-- Conditions by type, leaving out any written for an older generation.
local current = {}
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    if condition.observedGeneration == nil or condition.observedGeneration == generation then
      current[condition.type] = condition
    end
  end
end

local function says(condition)
  if condition.message ~= nil and condition.message ~= "" then
    return condition.message
  end
  return condition.reason or ""
end

local stalled, reconciling, ready = current.Stalled, current.Reconciling, current.Ready
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = says(stalled)
elseif reconciling ~= nil and reconciling.status == "True" then
  hs.message = says(reconciling)
elseif ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = says(ready)
elseif ready ~= nil then
  hs.message = says(ready)
else
  hs.message = "Waiting for the Ready condition."
end
return hs
