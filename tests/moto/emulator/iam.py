"""IAM's gaps:
  * ListInstanceProfileTags (moto: none, a 500): the profile's tags, sorted by key, paged with
    Marker and MaxItems as ListRoleTags is; NoSuchEntity (404) for a profile that does not
    exist (`forge::iam_instance_profile_find` after a run killed mid-create);
  * AddClientIDToOpenIDConnectProvider and RemoveClientIDFromOpenIDConnectProvider (moto: none,
    a 500): idempotent as IAM's are (adding a client id the provider has, or removing one it
    has not, changes nothing), at most 100 client ids (LimitExceeded), NoSuchEntity for a
    provider that does not exist.
"""

from moto.core.responses import ActionResult, EmptyResult
from moto.iam.exceptions import LimitExceededException
from moto.iam.responses import IamResponse

CLIENT_IDS_PER_PROVIDER = 100


def list_instance_profile_tags(self):
    profile = self.backend.get_instance_profile(self._get_param("InstanceProfileName"))
    start = int(self._get_param("Marker") or 0)
    count = int(self._get_param("MaxItems", 100))
    tags = sorted(profile.tags, key=lambda t: t["Key"])
    page, more = tags[start:start + count], start + count < len(tags)
    return ActionResult({"Tags": page, "IsTruncated": more, "Marker": str(start + count) if more else None})


def add_client_id(self):
    provider = self.backend.get_open_id_connect_provider(self._get_param("OpenIDConnectProviderArn"))
    client_id = self._get_param("ClientID")
    if client_id not in provider.client_id_list:
        if len(provider.client_id_list) >= CLIENT_IDS_PER_PROVIDER:
            raise LimitExceededException(f"Cannot exceed quota for ClientIdsPerOpenIdConnectProvider: {CLIENT_IDS_PER_PROVIDER}")
        provider.client_id_list.append(client_id)
    return EmptyResult()


def remove_client_id(self):
    provider = self.backend.get_open_id_connect_provider(self._get_param("OpenIDConnectProviderArn"))
    client_id = self._get_param("ClientID")
    if client_id in provider.client_id_list:
        provider.client_id_list.remove(client_id)
    return EmptyResult()


IamResponse.list_instance_profile_tags = list_instance_profile_tags
IamResponse.add_client_id_to_open_id_connect_provider = add_client_id
IamResponse.remove_client_id_from_open_id_connect_provider = remove_client_id
