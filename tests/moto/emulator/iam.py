"""IAM's gaps:
  * ListInstanceProfileTags (moto: none, a 500 HTML page): the profile's tags, sorted by key,
    paged with Marker and MaxItems as ListRoleTags is; NoSuchEntity (404) for a profile that
    does not exist (`forge::iam_instance_profile_find` after a run killed mid-create).
"""

from moto.core.responses import ActionResult
from moto.iam.responses import IamResponse


def list_instance_profile_tags(self):
    profile = self.backend.get_instance_profile(self._get_param("InstanceProfileName"))
    start = int(self._get_param("Marker") or 0)
    count = int(self._get_param("MaxItems", 100))
    tags = sorted(profile.tags, key=lambda t: t["Key"])
    page, more = tags[start:start + count], start + count < len(tags)
    return ActionResult({"Tags": page, "IsTruncated": more, "Marker": str(start + count) if more else None})


IamResponse.list_instance_profile_tags = list_instance_profile_tags
