/**
 * The settings editor's field for the token: a password input, so the token shows as dots
 * and never as text. A form renderer (JupyterLab's registry) rather than the schema's
 * `format: "password"`, which JupyterLab's validator does not know and warns about.
 */
import { IFormRenderer } from '@jupyterlab/ui-components';
import * as React from 'react';

/** The rjsf field props this field reads (the registry passes `FieldProps`). */
interface IPasswordFieldProps {
  formData?: string;
  disabled?: boolean;
  readonly?: boolean;
  idSchema?: { $id: string };
  schema: { title?: string; description?: string };
  onChange: (value: string) => void;
}

function PasswordField(props: IPasswordFieldProps): React.ReactElement {
  const id = props.idSchema?.$id ?? 'kbsql-token';
  // A custom field draws its own label; the settings editor still adds the description.
  const label = React.createElement('label', { htmlFor: id }, props.schema.title ?? 'Token');
  const input = React.createElement('input', {
    id,
    type: 'password',
    className: 'form-control',
    autoComplete: 'off',
    spellCheck: false,
    value: props.formData ?? '',
    disabled: props.disabled || props.readonly,
    onChange: (event: React.ChangeEvent<HTMLInputElement>) => props.onChange(event.target.value)
  });
  return React.createElement('div', { className: 'kbsql-TokenField' }, label, input);
}

export const passwordRenderer: IFormRenderer = {
  fieldRenderer: PasswordField as unknown as IFormRenderer['fieldRenderer']
};
